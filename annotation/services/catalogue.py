"""Public write API of the catalogue for other apps (analytics' score import makes the
custom skills a file names). The catalogue's services live in annotation/catalogue/."""

from annotation.catalogue.services import skill_create

__all__ = ["skill_create"]
