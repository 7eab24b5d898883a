"""Developer tools of the project (not installed with it): test harnesses that users can run too."""
