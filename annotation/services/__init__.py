"""Write services of the annotation app, split by subdomain (catalogue, imports, projects)."""
