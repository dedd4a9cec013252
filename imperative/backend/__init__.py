"""Below the ops: how their kernels run. `native` chooses the native kernels
(imperative._kernels) over numpy's; `epilogue` is the protocol by which a product does the
next op's work in its stores. Nothing here imports the ops or the facade."""
