"""The four ways to change an object in place: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
strategic merge patch (by the schema's patch strategies and merge keys) and server-side apply
(``fieldmanager``: managedFields, ownership, conflicts). Pure functions over JSON values and
schema nodes; the registry decides which applies and what the result may be.
"""
