"""The runner daemon: a loop of dispatch passes (:mod:`..dispatch`), woken
early by the store's notifications (:mod:`.wakeup`), that takes the
monitor's duties in turn (:mod:`.loop`), with the interpreter tuned for a
long-lived process (:mod:`.interpreter`).

It sits above the dispatch pass and the monitor, which it runs together."""
