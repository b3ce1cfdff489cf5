"""storage.k8s.io/v1 kinds served as storage only (``app.registry.storageonly``): StorageClass,
CSINode, CSIDriver, CSIStorageCapacity, VolumeAttachment. (Not to be confused with ``app.storage``,
where objects are kept.)"""
