"""The composition room: what builds a run's services from its config (``services``), runs and
resumes runs (``run``), compares strategies (``compare``), opens the graph checkpointer
(``checkpointer``), exports Harness-S's router (``bundle``) and a run's final pair as an agent folder
(``export``; read back and versioned by ``release``) and gives Studio its graphs with a default
context bound (``studio``). Everything below it is handed what it needs; only this
package (and the CLI above it) puts the pieces together."""
