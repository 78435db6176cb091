"""Staff: a class export regraded (batch), its gradebook, class report, diff and pictures."""
