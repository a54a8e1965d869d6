"""Observers of a run, low in the layers so every layer above can report without importing a
renderer: the progress reporter nodes and the evaluation engine write to (``progress``), the
experiment trackers the loop's numbers go to (``tracking``) and the reader of what a TensorBoard
tracker wrote (``events``)."""
