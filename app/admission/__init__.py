"""Admission steps that may wait (they read and write stored objects before they answer), run by
the generic store on every create and update through ``GenericStore.write_admission``; the
server's assembly (``app/server.py``) installs the ones its flags enable."""
