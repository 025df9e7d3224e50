"""The store's data model, shared by the shop and the admin panel: schema, business rules, seed generator."""
