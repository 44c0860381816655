"""The detectors: each reads the event stream through the Detector interface and emits Detections."""
