"""Machine API types: the ``machine.sapcloud.io`` group (:mod:`mcm.apis.machine`).

Layering: imports only :mod:`mcm.runtime`; the driver, controller and app build on it.
"""
