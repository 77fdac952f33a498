"""The column sets of the built-in kinds, a module per API group (as kubectl's printers print
them); ``printing.tables`` maps each resource to its set.
"""
