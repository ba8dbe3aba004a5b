def test_control_plane_is_in_template(db):
    assert db.execute("select count(*) from pgrecall.source").fetchone()[0] > 0
    assert db.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0] is False
