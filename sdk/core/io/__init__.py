"""Readers and writers of real dataset formats (MOT, JRDB, Collective Activity, PETS/CVML, stickmen,
JRDB-PAR)."""
