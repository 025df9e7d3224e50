"""The customer storefront of the Larkspur Goods store: browse, search, cart, checkout, account, reviews."""
