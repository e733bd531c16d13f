"""The compare layer: does a deployed model still match fp32 (the one comparator, parity packs and
checks). Stands on the runtime."""
