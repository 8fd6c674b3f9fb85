def histogram(values, width, buckets):
    """Count non-negative values into `buckets` bins of size `width` starting at 0.

    Bin i holds values v with i * width <= v < (i + 1) * width. Values at or
    beyond buckets * width are counted in the last bin.
    """
    counts = [0] * buckets
    for v in values:
        i = int(v // width)
        if i > buckets:
            i = buckets - 1
        counts[i] += 1
    return counts
