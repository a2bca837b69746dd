"""A run's life: its checkpoints, relaunch, stops, lock, settings, launches, record, learning curve and Hub pushes."""
