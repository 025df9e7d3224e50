-- The store's data, shared by the shop (customers) and the admin panel (staff). Money is in integer cents.
CREATE TABLE categories (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER REFERENCES categories(id),
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category_id INTEGER NOT NULL REFERENCES categories(id),
    brand TEXT NOT NULL,
    description TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents > 0),
    sale_price_cents INTEGER CHECK (sale_price_cents IS NULL OR sale_price_cents > 0),
    stock INTEGER NOT NULL CHECK (stock >= 0),
    status TEXT NOT NULL CHECK (status IN ('active', 'disabled')),
    color TEXT,
    weight_grams INTEGER,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX products_category ON products(category_id);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    phone TEXT NOT NULL DEFAULT '',
    customer_group TEXT NOT NULL CHECK (customer_group IN ('general', 'wholesale', 'vip')),
    is_active INTEGER NOT NULL DEFAULT 1,
    newsletter INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE addresses (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    full_name TEXT NOT NULL,
    line1 TEXT NOT NULL,
    line2 TEXT NOT NULL DEFAULT '',
    city TEXT NOT NULL,
    region TEXT NOT NULL,
    postcode TEXT NOT NULL,
    country TEXT NOT NULL,
    phone TEXT NOT NULL DEFAULT '',
    is_default INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX addresses_customer ON addresses(customer_id);
CREATE TABLE cart_items (
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    added_at TEXT NOT NULL,
    PRIMARY KEY (customer_id, product_id)
);
CREATE TABLE wishlist_items (
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    added_at TEXT NOT NULL,
    PRIMARY KEY (customer_id, product_id)
);
CREATE TABLE coupons (
    code TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('percent', 'fixed', 'free_shipping')),
    amount INTEGER NOT NULL DEFAULT 0, -- percent, or cents for 'fixed'
    min_subtotal_cents INTEGER NOT NULL DEFAULT 0,
    starts_on TEXT NOT NULL,
    expires_on TEXT,
    is_active INTEGER NOT NULL DEFAULT 1,
    usage_limit INTEGER,
    times_used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    number TEXT NOT NULL UNIQUE,
    customer_id INTEGER REFERENCES customers(id), -- NULL: a guest order
    email TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'on_hold', 'shipped', 'delivered', 'cancelled', 'refunded')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    subtotal_cents INTEGER NOT NULL,
    discount_cents INTEGER NOT NULL DEFAULT 0,
    shipping_cents INTEGER NOT NULL,
    tax_cents INTEGER NOT NULL,
    total_cents INTEGER NOT NULL,
    coupon_code TEXT,
    shipping_method TEXT NOT NULL,
    payment_method TEXT NOT NULL,
    card_last4 TEXT,
    ship_name TEXT NOT NULL,
    ship_line1 TEXT NOT NULL,
    ship_line2 TEXT NOT NULL DEFAULT '',
    ship_city TEXT NOT NULL,
    ship_region TEXT NOT NULL,
    ship_postcode TEXT NOT NULL,
    ship_country TEXT NOT NULL,
    ship_phone TEXT NOT NULL DEFAULT '',
    tracking_number TEXT,
    customer_note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX orders_created ON orders(created_at);
CREATE TABLE order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER REFERENCES products(id),
    sku TEXT NOT NULL,
    name TEXT NOT NULL,
    unit_price_cents INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    line_total_cents INTEGER NOT NULL
);
CREATE INDEX order_items_order ON order_items(order_id);
CREATE INDEX order_items_product ON order_items(product_id);
CREATE TABLE order_history (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(id),
    status TEXT NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    author TEXT NOT NULL,
    notify_customer INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX order_history_order ON order_history(order_id);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES products(id),
    customer_id INTEGER REFERENCES customers(id),
    author_name TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('approved', 'pending', 'rejected')),
    created_at TEXT NOT NULL
);
CREATE INDEX reviews_product ON reviews(product_id);
CREATE TABLE admin_users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    email TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    full_name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('administrator', 'manager', 'support')),
    is_active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL
);
CREATE TABLE store_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
