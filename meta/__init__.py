"""coevo.meta: the meta-loop's typed state, its run-time context, and the durable run driver."""
