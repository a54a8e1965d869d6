"""coevo.report: progress reporting for nodes, the HTML run report and its plots."""
