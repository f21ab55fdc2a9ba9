"""Reports from the results database: plots (plots.py), tables (tables.py), Markdown and HTML
(render.py). Reading only the database, they need no GPU."""
