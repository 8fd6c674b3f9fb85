from matrix import Matrix


def test_square_transpose():
    m = Matrix([[1, 2], [3, 4]])
    assert m.transpose() == Matrix([[1, 3], [2, 4]])


def test_wide_transpose():
    m = Matrix([[1, 2, 3], [4, 5, 6]])
    assert m.transpose() == Matrix([[1, 4], [2, 5], [3, 6]])
    assert m.transpose().shape == (3, 2)


def test_transpose_twice_is_identity():
    m = Matrix([[1], [2], [3]])
    assert m.transpose().transpose() == m
