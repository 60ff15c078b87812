"""One module per extra CLI command; each exports ``command`` (a click.Command). Found by cli.py."""
