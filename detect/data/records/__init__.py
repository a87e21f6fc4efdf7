"""What the pipeline knows of each image: records and their table, the label cache (rank 0 first), the decoded-image cache, image files read (EXIF, odd formats, unreadable ones)."""
