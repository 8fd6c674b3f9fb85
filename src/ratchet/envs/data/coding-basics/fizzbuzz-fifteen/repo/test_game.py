from game import fizzbuzz

def test_plain():
    assert fizzbuzz(7) == "7"

def test_fizz_buzz():
    assert fizzbuzz(9) == "Fizz" and fizzbuzz(10) == "Buzz"

def test_fizzbuzz():
    assert fizzbuzz(15) == "FizzBuzz" and fizzbuzz(45) == "FizzBuzz"
