def chunks(seq, n):
    """Split seq into consecutive lists of length n (the last may be shorter)."""
    out = []
    for i in range(0, len(seq) - n + 1, n):
        out.append(list(seq[i:i + n]))
    return out
