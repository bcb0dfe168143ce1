"""Writers: every report format (json, markdown, junit, csv, html, the GitHub step) and how each
section of the results shows in them.

May import: everything above them (up to results)."""
