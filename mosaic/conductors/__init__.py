"""mosaic.conductors."""
