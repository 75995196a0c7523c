"""Speed scripts; figures in ``bench/RESULTS.md`` (see ``bench/README.md``)."""
