"""Mean-field dynamics of wide shallow networks (paper 002): particles, transport PDE, ansatzes.

Conventions used throughout the subpackage:

- A network is ``f(W, x) = sum_n q_n phi(w_n, x)`` with particle weights ``q_n`` summing to 1 (Eq. 1
  has ``q_n = 1/N``; weighted quadrature nodes of a density give the infinite-width limit, Eq. 6).
- Weights ``W`` have shape ``(..., N, d)``; inputs ``x`` shape ``(M,)``; the input measure ``mu``
  is a probability measure (its weights sum to 1).
- Time ``t`` is the time of Eq. (3) with learning rate ``alpha = N``: every particle moves with the
  velocity ``-grad u(w, t)`` of Eqs. (9)-(10), whatever N is.
"""
