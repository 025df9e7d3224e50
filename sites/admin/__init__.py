"""The staff admin panel of the Larkspur Goods store: orders, products, customers, reviews, coupons, reports."""
