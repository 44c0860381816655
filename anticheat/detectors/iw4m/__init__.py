"""IW4MAdmin's anti-cheat, ported: hit-location ratios, view-angle offsets and strain, input checks."""
