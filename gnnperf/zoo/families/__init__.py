"""Importing this package registers every zoo family."""
