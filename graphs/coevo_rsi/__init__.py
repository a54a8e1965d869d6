"""CoEvo-RSI's family ("When Harnesses Evolve, Which Models Should Follow?"; docs/papers.md): CoEvo-RSI and its
Latest-only ablation. Read ``coevo_rsi.py`` (the algorithm and its wiring), ``harness_inheritance.py`` (survey,
curate from the archive, edit a chosen base), ``model_inheritance.py`` (inherit, adapt, promote) and
``state.py``; ``archive_view.py`` builds the archive summary A<t."""
