-- 0006: every change to who may reach what (users, their tokens, grants, projects) tells
-- every listening server at commit, however it was made, so a server may keep what a token
-- admits in memory and still stop a rotated token, a removed user or a revoked grant at once.
CREATE FUNCTION car_auth_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('car_auth', TG_TABLE_NAME);
    RETURN NULL;
END
$$;
CREATE TRIGGER car_users_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON car_users
    FOR EACH STATEMENT EXECUTE FUNCTION car_auth_changed();
CREATE TRIGGER car_grants_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON car_grants
    FOR EACH STATEMENT EXECUTE FUNCTION car_auth_changed();
CREATE TRIGGER car_projects_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON car_projects
    FOR EACH STATEMENT EXECUTE FUNCTION car_auth_changed();
