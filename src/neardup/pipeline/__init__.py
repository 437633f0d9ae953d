"""The dedup job: scan -> seen -> decide -> write -> update, and its result."""
