"""Small programs built on mcm's runtime, read as documentation (start with ``sample_controller``)."""
