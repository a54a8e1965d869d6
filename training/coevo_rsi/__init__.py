"""CoEvo-RSI's training (``coevo.graphs.coevo_rsi`` uses it): LoRA adapter merges with stated exactness
(``merge``: linear task arithmetic, TIES, their svd variants), which model inheritance combines parents with
and ``coevo.training.delta`` reads adapters through."""
