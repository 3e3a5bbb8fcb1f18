"""Tests of callgate.eval: task sets, the checker, the funnel, tokens and eta, the lab."""
