"""What a registered tool is: capabilities and effects, argument binding, value conversion."""
