"""AimDetect: per-kill aim features scored by a trained SVM, accumulated by a sequential test."""
