"""koe's command line (Typer + Rich): a thin shell over `koe.service`."""
