"""Sweeps and their analysis.

``sweep`` runs the study; ``results`` turns run directories into reports.
"""
