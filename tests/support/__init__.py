"""Helpers the tests share: real servers on loopback, migration folders, a TCP proxy that can stall."""
