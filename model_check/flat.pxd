# Cython declarations for model_check/flat.py when model_check.compiled builds it: the
# field positions as C integers, so that `r[LOG]` compiles to a direct tuple access instead
# of a lookup of a global and a conversion of it to an index (a fifth fewer instructions
# over the explorer's first 50,000 states). Python never reads this file.
cdef Py_ssize_t ROWS, ALIVE, BROKER_EPOCHS, CTRL, LAI, FETCH_ROWS, PRODUCE, ACKED, CONSUMED
cdef Py_ssize_t EXCUSED, NEXT_VALUE, CRASHES, EXPIRIES, DROPS, TICKS, LOSSES
cdef Py_ssize_t LOG, HW, FLUSHED, CACHE, LEADER, LEPOCH, ISR, PEPOCH, TRUNC, RLEO, RBE, LAG, PURG
cdef Py_ssize_t FETCH_LEN, EPOCH_LEN, RESPONSE_LEN
