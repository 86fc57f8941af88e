"""The operator API: the :class:`Operator` protocol and the in-process operators, the services
that drive them (ActorService, PolicyMappingService), and how an operator is configured."""
