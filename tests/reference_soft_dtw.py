"""Plain float64 soft-DTW (Cuturi & Blondel 2017), cell by cell, for the tests.

R[0, 0] = 0, R[i, 0] = R[0, j] = +inf (i, j >= 1), cells with |i - j| > bandwidth = +inf,
R[i, j] = C[i-1, j-1] + softmin_g(R[i-1, j], R[i-1, j-1], R[i, j-1]) with
softmin_g(a, b, c) = -g log(exp(-a/g) + exp(-b/g) + exp(-c/g)); the value R[n, m].
The gradient is the expected alignment E[i, j] = dR[n, m] / dC[i-1, j-1], swept back from
E[n, m] = 1 with each cell's softmin weights of its three predecessors.
"""

from __future__ import annotations

import math

INF = math.inf


def _softmin(vals, g):
    m = min(vals)
    if m == INF:
        return INF
    return m - g * math.log(sum(math.exp(-(v - m) / g) for v in vals))


def table(costs, gamma, bandwidth=None):
    """R as a list of lists, (n + 1) x (m + 1), of the n x m cost list ``costs``."""
    n, m = len(costs), len(costs[0])
    R = [[INF] * (m + 1) for _ in range(n + 1)]
    R[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if bandwidth is not None and abs(i - j) > bandwidth:
                continue
            s = _softmin((R[i - 1][j], R[i - 1][j - 1], R[i][j - 1]), gamma)
            R[i][j] = costs[i - 1][j - 1] + s
    return R


def value(costs, gamma, bandwidth=None) -> float:
    return table(costs, gamma, bandwidth)[-1][-1]


def _weights(R, i, j, g):
    """Softmin weights of cell (i, j)'s predecessors (up, diagonal, left)."""
    preds = (R[i - 1][j], R[i - 1][j - 1], R[i][j - 1])
    m = min(preds)
    if m == INF or R[i][j] == INF:
        return (0.0, 0.0, 0.0)
    e = [math.exp(-(p - m) / g) for p in preds]
    z = sum(e)
    return tuple(x / z for x in e)


def gradient(costs, gamma, bandwidth=None):
    """(dV/dcosts as an n x m list, dV/dgamma)."""
    n, m = len(costs), len(costs[0])
    R = table(costs, gamma, bandwidth)
    E = [[0.0] * (m + 2) for _ in range(n + 2)]
    E[n][m] = 1.0
    dg = 0.0
    for i in range(n, 0, -1):
        for j in range(m, 0, -1):
            if (i, j) != (n, m):
                e = 0.0
                if i < n:
                    e += E[i + 1][j] * _weights(R, i + 1, j, gamma)[0]
                if i < n and j < m:
                    e += E[i + 1][j + 1] * _weights(R, i + 1, j + 1, gamma)[1]
                if j < m:
                    e += E[i][j + 1] * _weights(R, i, j + 1, gamma)[2]
                E[i][j] = e
            # dR[i, j] / dgamma through this cell's softmin: sum_k w_k log w_k
            dg += E[i][j] * sum(w * math.log(w) for w in _weights(R, i, j, gamma) if w > 0)
    return [row[1:m + 1] for row in E[1:n + 1]], dg
