"""Reading finished runs: learning curves from TensorBoard files (``plot``) and the statistics
over seeds they draw (``stats``)."""
